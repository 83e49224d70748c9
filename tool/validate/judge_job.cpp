#include "validate/judge_job.h"

#include <algorithm>
#include <map>
#include <random>

#include "common/settings.h"
#include "device/tolerance.h"
#include "sandbox/confine.h"
#include "sandbox/sandbox.h"
#include "task/fitness.h"
#include "validate/accuracy.h"

namespace kevo {

namespace {
// What the judge saw of other processes on the GPU around a wall-clock rejection
// (runner/gpu_activity.h), as a line for the log; marks the result not attributable to the kernel
// when another process used the GPU meanwhile.
std::string interference_note(const nlohmann::json& a, nlohmann::json& details) {
    if (!a.is_object() || a.value("source", "") != "nvml")
        return "(whether other processes used the GPU meanwhile is unknown here: " +
               (a.is_object() ? a.value("why", std::string("the judge did not say")) : std::string("the judge did not say")) + ")";
    std::string who;
    for (const auto& o : a.value("others", nlohmann::json::array()))
        who += (who.empty() ? "" : "; ") + std::string("pid ") + std::to_string(o.value("pid", 0)) + " (" + o.value("name", std::string()) +
               "): SM up to " + std::to_string(o.value("sm_pct", 0)) + "%, memory up to " + std::to_string(o.value("mem_pct", 0)) + "%";
    if (who.empty()) return "(no other process used the GPU meanwhile, by NVML's per-process samples)";
    details["not_attributable"] = true;
    return "During this validation other processes used the GPU (" + who +
           "): the extra time may be theirs, and it is not attributed to the kernel.";
}

// The weighted geometric mean of the timed shape sets' speedups (task/fitness.h).
double shapes_geomean(const std::vector<ShapeTiming>& shapes) {
    std::vector<double> s, w;
    for (const auto& t : shapes) s.push_back(t.speedup), w.push_back(t.weight);
    return weighted_geomean(s, w);
}

// Where the cuBLAS libraries the runner opens for candidates of ABI version 2 really are
// (runner/cublas_host.cpp): the sandbox shows them and Landlock lets the candidate process read them.
std::vector<std::string> cublas_dirs() {
    std::vector<std::string> dirs;
    for (const char* lib : {KEVO_CUBLAS_LIBRARY, KEVO_CUBLASLT_LIBRARY}) {
        std::error_code ec;
        const fs::path real = fs::canonical(lib, ec);
        if (ec) continue;
        const std::string dir = real.parent_path().string();
        if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    }
    return dirs;
}

// Landlock's view for the candidate process: the system paths (with namespaces they are all the
// sandbox has anyway; without, only the candidate's own /proc entry), the runner and cuBLAS.
std::vector<std::string> candidate_readable(const fs::path& runner, bool namespaces) {
    std::vector<std::string> r = system_readable_paths(namespaces);
    r.push_back(runner.string());
    for (const auto& d : cublas_dirs()) r.push_back(d);
    return r;
}

JobTensor job_tensor(const Task& task, const TensorSpec& t, size_t set) {
    JobTensor jt;
    jt.name = t.name;
    jt.dtype = dtype_abi(t.dtype);
    jt.sizes = task.concrete_shape(t, set);
    return jt;
}

// The per-set timing the judge sent (timing.sets) and the speedups over them.
void read_timing(JobResult& out, const ValidateOptions& options, ValidationResult& res) {
    for (const auto& t : out.timing["sets"]) {
        ShapeTiming st;
        st.set = t.value("shape_set", 0);
        st.label = t.value("label", std::string());
        st.kernel_us = t["kernel"].value("time_us", 0.0);
        st.reference_us = t["reference"].value("time_us", 0.0);
        st.speedup = t.value("speedup", 0.0);
        st.weight = t.value("weight", 1.0);
        res.shapes.push_back(st);
    }
    if (res.shapes.empty()) return;
    const auto& t0j = out.timing["sets"][0];
    res.kernel_us = res.shapes[0].kernel_us;
    res.reference_us = res.shapes[0].reference_us;
    res.kernel_spread = t0j["kernel"].value("spread", 0.0);
    res.reference_spread = t0j["reference"].value("spread", 0.0);
    res.speedup = shapes_geomean(res.shapes);
    // Beside it, never ranked by: the speedup against the reference in strict fp32, where the
    // judge timed that too (LibTorch's defaults run TF32; runner/timing.cu), over the same sets.
    std::vector<ShapeTiming> strict = res.shapes;
    bool every_set = true;
    for (size_t i = 0; i < strict.size(); ++i) {
        const auto& t = out.timing["sets"][i];
        every_set = every_set && t.contains("speedup_vs_strict_fp32");
        if (every_set) strict[i].speedup = t["speedup_vs_strict_fp32"].get<double>();
    }
    if (every_set) res.details["speedup_vs_strict_fp32"] = shapes_geomean(strict);
    res.suspicious = res.speedup > options.suspicious_speedup;
    if (res.suspicious)
        res.log += (res.log.empty() ? "" : "\n") + std::string("suspicious: ") + std::to_string(res.speedup) +
                   "x faster than the reference (threshold " + std::to_string(options.suspicious_speedup) +
                   "x); it enters a cache only if a second validation agrees";
}
}  // namespace

std::string log_tail(const std::string& s, size_t n) { return s.size() <= n ? s : "[...]\n" + s.substr(s.size() - n); }

uint64_t job_seed(const ValidateOptions& options, uint64_t seed_offset) {
    if (options.seed) return options.seed + seed_offset;
    std::random_device rd;
    uint64_t seed = ((static_cast<uint64_t>(rd()) << 32) ^ rd()) & ((1ull << 53) - 1);  // exact in any JSON reader
    return seed == 0 ? 1 : seed;
}

void set_job_sandbox(Job& job, const fs::path& workdir, const fs::path& runner, bool gpu, bool namespaces,
                     const ValidateOptions& options) {
    job.workdir = workdir.string();
    SandboxPolicy policy;
    policy.workdir = workdir;
    policy.gpu = gpu;
    policy.read_only = {runner};
    for (const auto& d : cublas_dirs()) policy.read_only.push_back(d);
    job.sandbox_prefix = sandbox_prefix(policy);
    std::map<std::string, std::string> extra;
    if (options.device_index >= 0) extra[env_name(EnvVar::kDevice)] = std::to_string(options.device_index);
    job.candidate_env = sandbox_environment(extra);
    job.candidate_env["HOME"] = workdir.string();
    job.confine = sandbox_mode() != SandboxMode::off;
    job.readable = candidate_readable(runner, namespaces);
    job.readable.push_back(workdir.string());
    // With namespaces /tmp is the sandbox's own; without them the real /tmp stays out of reach.
    job.writable = {workdir.string(), "/dev"};
    if (namespaces) job.writable.push_back("/tmp");
    job.call_timeout_s = options.timeout_s;
}

std::vector<JobShapeSet> job_shape_sets(const Task& task) {
    std::vector<JobShapeSet> sets;
    const std::vector<int> timed = task.timed_sets();
    const std::vector<double> weights = task.weights();
    for (size_t s = 0; s < task.shapes.size(); ++s) {
        JobShapeSet set;
        for (const auto& [k, v] : task.shapes[s]) set.label += (set.label.empty() ? "" : ", ") + k + "=" + std::to_string(v);
        for (const auto& t : task.inputs) {
            JobTensor jt = job_tensor(task, t, s);
            jt.init = kevo_init_kind_from_name(t.init.kind.c_str());
            jt.a = t.init.a;
            jt.b = t.init.b;
            jt.path = t.init.file.string();
            jt.parameter = t.init.parameter;
            set.inputs.push_back(jt);
        }
        for (const auto& t : task.outputs) set.outputs.push_back(job_tensor(task, t, s));
        auto at = std::find(timed.begin(), timed.end(), static_cast<int>(s));
        set.timed = at != timed.end();
        set.weight = set.timed && static_cast<size_t>(at - timed.begin()) < weights.size() ? weights[at - timed.begin()] : 1.0;
        sets.push_back(set);
    }
    return sets;
}

void set_job_checks(Job& job, const Task& task, const ValidateOptions& options) {
    job.trials = task.correctness_trials;
    job.atol = task.atol;
    job.rtol = task.rtol;
    job.time = options.time_kernels;
    job.timing_trials = options.timing_trials;
    job.min_timing_trials = std::min(options.min_timing_trials, options.timing_trials);
    job.target_ci = options.target_ci;
    job.extend_timing_s = options.extend_timing_s;
    job.verify_fraction = options.verify_fraction;
    job.warmup = options.warmup;
    job.timing_budget_s = std::max(1.0, options.timeout_s * 0.4);
    job.l2_flush = options.l2_flush;
    job.timing_copies = options.timing_copies;
}

void read_job_result(JobResult out, const ValidateOptions& options, ValidationResult& res) {
    res.status = parse_status(out.status);
    res.log = out.log;
    res.max_abs_diff = out.max_abs_diff;
    res.trials = out.trials;
    res.details = nlohmann::json(out);
    res.details.erase("log");
    res.details.erase("status");
    for (auto& w : summarize_accuracy(res.details)) {  // details.accuracy and .kernelbench_check (accuracy.h)
        res.details["warnings"].push_back(w);
        out.warnings.push_back(std::move(w));
    }
    if (!out.candidate_output.empty()) res.details["candidate_output"] = log_tail(out.candidate_output, 4000);
    if (out.timing.contains("sets")) read_timing(out, options, res);
    if (res.status == Status::ok)
        for (const auto& w : out.warnings) res.log += (res.log.empty() ? "" : "\n") + std::string("warning: ") + w;
    if (is_wall_check_rejection(res)) res.log += "\n" + interference_note(out.interference, res.details);
}

void add_validation_facts(nlohmann::json& details, const Task& task, uint64_t seed) {
    // The judge's waits for the device's lock (shared for its checks, exclusive for its timing).
    double lock_wait_s = 0;
    if (auto p = details.find("profile_s"); p != details.end() && p->is_object())
        for (const char* k : {"wait.shared", "wait.exclusive"})
            if (auto w = p->find(k); w != p->end() && w->is_number()) lock_wait_s += w->get<double>();
    details["gpu_lock_wait_s"] = lock_wait_s;
    details["seed"] = seed;
    details["tolerance"] = {{"atol", task.atol}, {"rtol", task.rtol}, {"rule", kevo_device::kToleranceRule}};
    if (!task.tolerance_policy.empty()) details["tolerance"]["policy"] = task.tolerance_policy;
    // The judge sends each side's precision with the timing; it describes the whole validation.
    if (auto t = details.find("timing"); t != details.end() && t->contains("reference_precision")) {
        details["reference_precision"] = (*t)["reference_precision"];
        t->erase("reference_precision");
    }
}

}  // namespace kevo
