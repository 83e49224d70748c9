// The PyTorch baselines (baseline.h): baseline_torch.py in the import's sandbox, its answer parsed.
#include "baseline/baseline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "device/fill.h"
#include "kernelbench/kernelbench.h"
#include "sandbox/sandbox.h"
#include "task/fitness.h"
#include "validate/turns.h"

namespace kevo::baseline {

namespace {

fs::path script_path() {
    fs::path installed = self_exe_dir().parent_path() / "share" / "kernelevo" / "baseline" / "baseline_torch.py";
    if (fs::exists(installed)) return installed;
#ifdef KEVO_BASELINE_SOURCE_DIR
    if (fs::exists(fs::path(KEVO_BASELINE_SOURCE_DIR) / "baseline_torch.py")) return fs::path(KEVO_BASELINE_SOURCE_DIR) / "baseline_torch.py";
#endif
    throw UsageError("the baseline script is missing (looked for " + installed.string() + ")");
}

double num_or(const nlohmann::json& j, const char* key, double scale) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() * scale : -1;
}

// The task's timed sets as the script reads them: every input's concrete shape and how the
// validator draws it (the seeds of copy c: tensor_seed(seed + c, k), a validation's first trial at seed + c).
nlohmann::json sets_spec(const Task& task, const Options& o) {
    nlohmann::json sets = nlohmann::json::array();
    for (int s : task.timed_sets()) {
        nlohmann::json ins = nlohmann::json::array();
        for (size_t k = 0; k < task.inputs.size(); ++k) {
            const TensorSpec& t = task.inputs[k];
            nlohmann::json seeds = nlohmann::json::array();
            for (int c = 0; c < std::max(1, o.copies); ++c) seeds.push_back(kevo_device::tensor_seed(o.seed + c, k));
            ins.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", task.concrete_shape(t, s)}, {"kind", t.init.kind},
                           {"a", t.init.a}, {"b", t.init.b}, {"seeds", seeds}, {"file", t.init.file.string()}});
        }
        sets.push_back({{"set", s}, {"label", std::to_string(s)}, {"inputs", ins}});
    }
    return sets;
}

// The sandbox the script runs in: the import's (no network, writes only to its own work dir and a
// private /tmp, no home, allowlisted environment), with the GPU's device nodes; visible read-only:
// the Python installation, the script, the importer's code (kernelevo.kernelbench: its filler) and the
// task's folder and files.
// Empty argv prefix with `why` set: no sandbox here (bwrap missing), so the module is not run.
std::vector<std::string> confine(const kernelbench::PythonInstall& py, const Task& task, const fs::path& work,
                                 const fs::path& package, std::optional<std::map<std::string, std::string>>& env,
                                 std::string& why) {
    if (sandbox_mode() == SandboxMode::off) return {py.executable};
    const SandboxLayers& l = sandbox_layers();
    if (!l.namespaces) {
        why = "the task's Python module runs only in the sandbox, which needs bubblewrap here (" + l.why_not + ")";
        return {};
    }
    std::vector<fs::path> readable = {script_path().parent_path(), package, task.file.parent_path()};
    for (const auto& t : task.inputs)
        if (!t.init.file.empty()) readable.push_back(t.init.file);
    kernelbench::PythonSandbox box = kernelbench::python_sandbox(py, work, true, readable, {{"TORCHINDUCTOR_CACHE_DIR", "/tmp/.inductor"}});
    std::vector<std::string> argv = sandbox_prefix(box.policy);
    if (argv.empty() || argv.back() != "--") {
        why = "the sandbox could not be set up (bwrap: " + l.bwrap + ")";
        return {};
    }
    argv.pop_back();
    argv.insert(argv.end(), {"--remount-ro", "/", "--", "/usr/bin/env", "HOME=/tmp", py.executable});
    env = std::move(box.env);
    return argv;
}

Result not_run_all(const std::string& why, const std::string& precision) {
    Result r;
    r.precision = precision;
    r.inductor.not_captured = "torch.compile made no code: " + why;
    for (const auto& k : kinds()) r.not_run[k] = why;
    return r;
}

std::string fixed(double v, const char* f) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
}

std::string time_str(double us) { return us >= 1000 ? fixed(us / 1000, "%.3f ms") : fixed(us, "%.2f us"); }

}  // namespace

const std::vector<Kind>& table() {
    static const std::vector<Kind> t = {
        {"eager", "PyTorch eager", "eager", ""},
        {"compile", "torch.compile (Inductor, default mode)", "torch.compile", ""},
        // Opt-in: an ahead-of-time compilation per timed shape set takes tens of seconds.
        {"aoti", "AOTInductor (torch.export + aoti_compile_and_package)", "AOTInductor",
         "--aoti: AOTInductor compiles ahead of time, tens of seconds per shape set"},
    };
    return t;
}

const std::vector<std::string>& kinds() {
    static const std::vector<std::string> k = [] {
        std::vector<std::string> v;
        for (const auto& e : table()) v.push_back(e.name);
        return v;
    }();
    return k;
}

std::vector<std::string> asked(const std::vector<std::string>& also) {
    std::vector<std::string> v;
    for (const auto& e : table())
        if (!*e.opt_in || std::find(also.begin(), also.end(), e.name) != also.end()) v.push_back(e.name);
    return v;
}

std::string choices() {
    std::string s = "reference";
    for (size_t i = 0; i < table().size(); ++i) s += std::string(i + 1 == table().size() ? " or " : ", ") + table()[i].name;
    return s;
}

namespace {
const Kind& find_kind(const std::string& kind) {
    for (const auto& e : table())
        if (kind == e.name) return e;
    throw UsageError("unknown baseline '" + kind + "' (expected " + choices() + ")");
}
}  // namespace

std::string label(const std::string& kind) { return kind == "reference" ? "the LibTorch reference" : find_kind(kind).label; }

std::string column(const std::string& kind) { return kind == "reference" ? "the LibTorch reference" : find_kind(kind).column; }

std::string columns(const std::vector<std::string>& which) {
    std::string s;
    for (const auto& k : which) s += (s.empty() ? "" : ", ") + column(k);
    return s;
}

double SetTime::us(const std::string& kind) const {
    return kind == "eager" ? eager_us : kind == "compile" ? compile_us : kind == "aoti" ? aoti_us : -1;
}

std::string task_precision(const Task& task) { return task.precision.name(); }

double Result::us(const std::string& kind) const { return sets.empty() ? -1 : sets.front().us(kind); }

std::string Result::why_not(const std::string& kind) const {
    if (auto it = not_run.find(kind); it != not_run.end()) return "not run: " + it->second;
    return us(kind) > 0 ? "" : "not run: not measured";
}

nlohmann::json Result::to_json() const {
    nlohmann::json s = nlohmann::json::array();
    auto opt = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(); };
    for (const auto& t : sets) {
        nlohmann::json row{{"set", t.set}, {"label", t.label}};
        for (const auto& k : kinds()) row[k + "_us"] = opt(t.us(k));
        s.push_back(row);
    }
    nlohmann::json j{{"sets", s}, {"not_run", not_run}, {"checks", checks}, {"torch_version", torch_version}, {"device", device},
                     {"precision", precision}, {"module", module}};
    for (const auto& k : kinds()) j[k + "_us"] = opt(us(k));
    const InductorCode& c = inductor;
    j["inductor"] = c.not_captured.empty() ? nlohmann::json{{"code", c.code}, {"kernels", c.kernels},
                                                            {"library_calls", c.library_calls}, {"bytes", c.bytes}}
                                           : nlohmann::json{{"not_captured", c.not_captured}};
    return j;
}

namespace {
// baseline_torch.py's "inductor" (or to_json's): {"code", "kernels", "library_calls", "bytes"} or {"not_captured"}.
InductorCode inductor_from_json(const nlohmann::json& j) {
    InductorCode c;
    if (!j.is_object()) return c;
    auto strings = [&](const char* key) {
        std::vector<std::string> v;
        if (j.contains(key) && j[key].is_array())
            for (const auto& x : j[key])
                if (x.is_string()) v.push_back(x.get<std::string>());
        return v;
    };
    auto text = [&](const char* key) { return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : ""; };
    c.not_captured = text("not_captured");
    c.code = text("code");
    c.kernels = strings("kernels");
    c.library_calls = strings("library_calls");
    c.bytes = j.contains("bytes") && j["bytes"].is_number_integer() ? j["bytes"].get<int64_t>() : 0;
    return c;
}
}  // namespace

// Reads both tool/baseline's JSON (*_us) and the script's (*_ms).
Result Result::from_json(const nlohmann::json& j) {
    Result r;
    auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
    r.torch_version = str("torch_version");
    r.device = str("device");
    r.precision = str("precision");
    r.module = str("module");
    if (j.contains("not_run") && j["not_run"].is_object())
        for (auto it = j["not_run"].begin(); it != j["not_run"].end(); ++it)
            if (it.value().is_string()) r.not_run[it.key()] = it.value().get<std::string>();
    if (j.contains("checks") && j["checks"].is_object()) r.checks = j["checks"];
    if (j.contains("inductor")) r.inductor = inductor_from_json(j["inductor"]);
    for (const auto& t : j.value("sets", nlohmann::json::array())) {
        SetTime st;
        st.set = t.value("set", 0);
        st.label = t.contains("label") && t["label"].is_string() ? t["label"].get<std::string>() : "";
        auto time = [&](const std::string& k) { return std::max(num_or(t, (k + "_us").c_str(), 1), num_or(t, (k + "_ms").c_str(), 1000)); };
        st.eager_us = time("eager");
        st.compile_us = time("compile");
        st.aoti_us = time("aoti");
        r.sets.push_back(st);
    }
    return r;
}

std::string no_module_reason(const fs::path& task_dir) {
    std::error_code ec;
    if (fs::is_regular_file(task_dir / "pytorch.json", ec) || fs::is_regular_file(task_dir / "problem.py", ec)) return "";
    return "the task has no PyTorch module (neither an imported KernelBench problem.py nor export_task's pytorch.json): "
           "its reference is LibTorch C++ only";
}

namespace {
// One run of the script for the kinds in o.which.
// The most GPU memory the script holds at once (validate/turns.h reserves it): one timed set at a time,
// its drawn inputs in every copy, the module's weights (file inputs) once, and its outputs four times
// (eager's reference, a call's own, torch.compile's and AOTInductor's buffers).
uint64_t script_memory_bytes(const Task& task, const Options& o) {
    uint64_t most = 0;
    for (int s : task.timed_sets()) {
        uint64_t b = 0;
        for (const auto& t : task.inputs)
            b += static_cast<uint64_t>(task.bytes(t, s)) * (t.init.kind == "file" ? 1 : std::max(1, o.copies));
        for (const auto& t : task.outputs) b += 4 * static_cast<uint64_t>(task.bytes(t, s));
        most = std::max(most, b);
    }
    return most;
}

Result measure_once(const Task& task, const Options& o, const DeviceInfo& device) {
    const std::string precision = task_precision(task);
    if (std::string why = no_module_reason(task.file.parent_path()); !why.empty()) return not_run_all(why, precision);
    std::string python;
    fs::path package;  // the folder holding kernelevo.kernelbench, whose filler draws the inputs
    try {
        python = kernelbench::find_python(o.python);
        package = kernelbench::python_package_dir();
    } catch (const UsageError& e) {
        return not_run_all(e.what(), precision);
    }
    const kernelbench::PythonInstall py = kernelbench::python_install(python);
    TempDir work("kernelevo-baseline");
    nlohmann::json spec{{"task_dir", task.file.parent_path().string()}, {"work_dir", work.path().string()}, {"kernelevo_python", package.string()},
                        {"precision", precision}, {"cudnn_tf32", task.precision.cudnn_tf32},
                        {"matmul_tf32", task.precision.matmul_tf32}, {"l2_flush", o.l2_flush}, {"warmup", o.warmup}, {"trials", o.trials},
                        {"which", o.which}, {"sets", sets_spec(task, o)},
                        {"turns", device.present ? work.path().string() : ""}};
    write_file_atomic(work.path() / "spec.json", spec.dump());
    ProcessOptions po;
    std::string why;
    po.argv = confine(py, task, work.path(), package, po.exact_env, why);
    if (po.argv.empty()) return not_run_all(why, precision);
    po.argv.insert(po.argv.end(), {script_path().string(), (work.path() / "spec.json").string()});
    po.timeout_s = o.timeout_s;
    po.cwd = work.path();
    // Loading the module, drawing inputs and compiling share the GPU; each set's timed calls have it
    // alone (the script asks for its turns: validate/turns.h).
    HelperRun helper;
    helper.reason = "PyTorch baselines of " + task.name;
    helper.turns_dir = work.path();
    helper.memory_bytes = script_memory_bytes(task, o);
    helper.note = o.note;
    const ProcessResult p = run_with_turns(po, device, helper);
    Result r;
    try {
        const size_t brace = p.out.rfind("\n{");
        r = Result::from_json(nlohmann::json::parse(p.out.substr(brace == std::string::npos ? 0 : brace + 1)));
    } catch (const std::exception&) {
        return not_run_all(script_failure(p), precision);
    }
    if (r.precision.empty()) r.precision = precision;
    for (const auto& e : table()) {
        const bool wanted = std::find(o.which.begin(), o.which.end(), e.name) != o.which.end();
        if (!wanted && *e.opt_in) r.not_run[e.name] = std::string("not asked for (") + e.opt_in + ")";
        if (!r.not_run.count(e.name) && r.us(e.name) <= 0) r.not_run[e.name] = "not measured";
    }
    return r;
}

bool says_out_of_memory(const std::string& why) {
    return why.find("out of memory") != std::string::npos || why.find("OutOfMemoryError") != std::string::npos;
}

// "pid 123 python3 14000 MiB; ..." from nvidia-smi, or "" where it cannot say.
std::string gpu_memory_holders() {
    ProcessOptions po;
    po.argv = {"nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"};
    po.timeout_s = 10;
    const ProcessResult p = run_process(po);
    if (!p.ok()) return "";
    std::string out;
    std::istringstream lines(p.out);
    for (std::string line; std::getline(lines, line) && out.size() < 400;)
        if (!line.empty()) out += (out.empty() ? "pid " : "; pid ") + line;
    return out;
}
}  // namespace

bool out_of_memory(const Result& r) {
    for (const auto& [kind, why] : r.not_run)
        if (says_out_of_memory(why)) return true;
    return false;
}

Result measure_for_memory(const std::function<Result()>& once, double pause_s) {
    constexpr int kAttempts = 6;  // as Validator::run_for_memory
    Result r = once();
    double pause = pause_s, waited = 0;
    for (int attempt = 1; attempt < kAttempts && out_of_memory(r); ++attempt) {
        std::this_thread::sleep_for(std::chrono::duration<double>(pause));
        waited += pause;
        pause = std::min(30.0, pause * 2);
        r = once();
    }
    if (!out_of_memory(r)) return r;
    const std::string holders = gpu_memory_holders();
    char span[64];
    std::snprintf(span, sizeof span, "%.0f s", waited);
    for (auto& [kind, why] : r.not_run)
        if (says_out_of_memory(why))
            why += " (the GPU's memory was full on each of " + std::to_string(kAttempts) + " attempts over " + span +
                   (holders.empty() ? ")" : "; held by " + holders + ")");
    return r;
}

// Why the script gave no answer. A crash inside one of AOTInductor's steps (the script names each
// on stderr before it starts) is PyTorch's own: on the H200 (PyTorch 2.11) aoti_load_package died
// with a segmentation fault even for a Linear + ReLU in a plain python3, outside kernelevo.
std::string script_failure(const ProcessResult& p) {
    const bool crashed = p.term_signal != 0 || (p.exit_code > 128 && p.exit_code < 160);  // bwrap passes 128 + signal on
    const size_t at = p.err.rfind("aoti step: ");
    if (crashed && at != std::string::npos) {
        const std::string step = p.err.substr(at + 11, p.err.find('\n', at) - at - 11);
        return "AOTInductor crashed inside PyTorch (" + p.describe() + ") in " + step +
               ": a fault of this PyTorch, not of the task or its kernel";
    }
    std::string err = p.err.size() > 300 ? "..." + p.err.substr(p.err.size() - 300) : p.err;
    return "the baseline script failed (" + p.describe() + (err.empty() ? "" : ": " + err) + ")";
}

Result with_aoti(Result r, const Result& a) {
    r.not_run.erase("aoti");
    if (a.not_run.count("aoti")) r.not_run["aoti"] = a.not_run.at("aoti");
    for (const auto& at : a.sets) {
        auto it = std::find_if(r.sets.begin(), r.sets.end(), [&](const SetTime& t) { return t.set == at.set; });
        if (it != r.sets.end()) {
            it->aoti_us = at.aoti_us;
        } else {  // eager's run measured nothing for this set: keep AOTInductor's time alone
            SetTime t = at;
            t.eager_us = t.compile_us = -1;
            r.sets.push_back(t);
        }
    }
    if (a.checks.contains("aoti")) r.checks["aoti"] = a.checks["aoti"];
    if (!r.not_run.count("aoti") && r.us("aoti") <= 0) r.not_run["aoti"] = "not measured";
    return r;
}

// AOTInductor runs in a process of its own: on the H200 (PyTorch 2.11) the first run with it asked for
// ended in a segmentation fault, and one process for all three lost eager's and torch.compile's times
// with it. Now a crash of the ahead-of-time compile or load costs only AOTInductor's time.
Result measure(const Task& task, const Options& o, const DeviceInfo& device) {
    auto once = [&](const Options& x) {
        return measure_for_memory([&] { return measure_once(task, x, device); }, o.memory_pause_s);
    };
    const bool aoti = std::find(o.which.begin(), o.which.end(), "aoti") != o.which.end();
    if (!aoti || o.which.size() == 1) return once(o);
    Options rest = o, alone = o;
    rest.which.erase(std::remove(rest.which.begin(), rest.which.end(), "aoti"), rest.which.end());
    alone.which = {"aoti"};
    return with_aoti(once(rest), once(alone));
}

double speedup_over(const Result& b, const std::string& kind, const std::vector<ShapeTiming>& kernel) {
    std::vector<double> s, w;
    for (const auto& k : kernel) {
        double base = -1;
        for (const auto& t : b.sets)
            if (t.set == k.set) base = t.us(kind);
        if (base <= 0 || k.kernel_us <= 0) return 0;
        s.push_back(base / k.kernel_us);
        w.push_back(k.weight);
    }
    return weighted_geomean(s, w);
}

std::string speedup_lines(const Result& b, const std::vector<ShapeTiming>& kernel, const std::string& indent) {
    std::string out;
    for (const auto& k : kinds()) {
        out += indent + label(k) + ": ";
        if (!b.ran(k)) {
            out += b.why_not(k) + "\n";
            continue;
        }
        const double s = speedup_over(b, k, kernel);
        out += time_str(b.us(k)) + " (precision " + b.precision + ", PyTorch " + b.torch_version + "); speedup " +
               (s > 0 ? fixed(s, "%.3fx") : std::string("- (no kernel time)")) + " over it\n";
    }
    return out;
}

nlohmann::json speedups_json(const Result& b, const std::vector<ShapeTiming>& kernel) {
    nlohmann::json j{{"precision", b.precision}, {"torch_version", b.torch_version}, {"device", b.device}};
    for (const auto& k : kinds()) {
        if (!b.ran(k)) {
            j[k] = {{"label", label(k)}, {"not_run", b.why_not(k).substr(9)}};
            continue;
        }
        const double s = speedup_over(b, k, kernel);
        j[k] = {{"label", label(k)}, {"us", b.us(k)}, {"speedup", s > 0 ? nlohmann::json(s) : nlohmann::json()}};
        if (b.checks.contains(k)) j[k]["check"] = b.checks[k];  // its outputs against eager's
    }
    return j;
}


namespace {
// The section's code part: what torch.compile runs on the first timed set, cut at `max` bytes.
std::string inductor_text(const Result& b, size_t max) {
    const InductorCode& c = b.inductor;
    if (!c.not_captured.empty() || c.code.empty()) return "";
    std::string out = "\n### What torch.compile runs (Inductor's generated code for shape set " +
                      (b.sets.empty() ? std::string("0") : b.sets.front().label) + ")\n\n";
    auto list = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
    };
    out += c.library_calls.empty() ? "It calls no library (cuBLAS, cuDNN) outside its own kernels"
                                   : "Library calls (cuBLAS, cuDNN through ATen): " + list(c.library_calls);
    out += c.kernels.empty() ? ".\n" : "; the kernels it generates: " + list(c.kernels) + ".\n";
    const std::string code = c.code.substr(0, max);
    out += "\n```python\n" + code + (code.back() == '\n' ? "" : "\n") + "```\n";
    const auto full = std::max<int64_t>(c.bytes, static_cast<int64_t>(c.code.size()));
    if (full > static_cast<int64_t>(code.size()))
        out += "[cut: Inductor's code has " + std::to_string(full) + " bytes; these are its first " +
               std::to_string(code.size()) + "]\n";
    return out;
}
}  // namespace

std::string to_beat_section(const Result& b, size_t max_code_bytes) {
    if (!b.ran("compile")) return "";
    std::string out = "\n\n## The time to beat: torch.compile\n\n"
                      "A PyTorch user would run the task's module under " + label("compile") +
                      " instead of your kernel: it is the time to beat. Both were timed on this GPU before the search "
                      "(PyTorch " + b.torch_version + ", precision " + b.precision +
                      "; the validator's inputs, each call after an L2 flush, the median). PyTorch eager runs the "
                      "module's own operators, as the reference does.\n\n"
                      "| shape set | PyTorch eager | torch.compile | torch.compile over eager |\n|---|---|---|---|\n";
    for (const auto& t : b.sets) {
        if (t.compile_us <= 0) continue;
        const bool eager = t.eager_us > 0;
        out += "| " + t.label + " | " + (eager ? time_str(t.eager_us) : "-") + " | " + time_str(t.compile_us) + " | " +
               (eager ? fixed(t.eager_us / t.compile_us, "%.2fx") : "-") + " |\n";
    }
    out += "\nA kernel beats torch.compile on a set only where it runs faster than torch.compile's time there: about "
           "the last column's speedup over PyTorch eager, or more.\n";
    return out + inductor_text(b, max_code_bytes);
}

}  // namespace kevo::baseline
